"""llmdeck.bench"""
