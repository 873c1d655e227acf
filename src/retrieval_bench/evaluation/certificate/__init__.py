"""The agreement certificate: does a synthetic question set decide as the reference set does?"""
