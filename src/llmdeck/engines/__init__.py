"""llmdeck.engines"""
