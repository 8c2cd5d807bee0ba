"""llmdeck.plan"""
