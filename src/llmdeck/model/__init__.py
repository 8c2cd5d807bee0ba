"""llmdeck.model"""
