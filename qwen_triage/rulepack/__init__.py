"""rulepack"""
