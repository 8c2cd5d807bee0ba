"""llmdeck.runtime"""
