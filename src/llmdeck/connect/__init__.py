"""llmdeck.connect"""
