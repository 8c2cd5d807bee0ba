"""llmdeck.catalog"""
