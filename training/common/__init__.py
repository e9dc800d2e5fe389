"""Common room: small file helpers every other room uses (atomic JSON writes, sha256 of a file).

Owns nothing else; it must stay free of torch and of every other room.
May import: the standard library only.
"""
