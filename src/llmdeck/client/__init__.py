"""llmdeck.client"""
