"""Searches that do not wait for compiled decoder steps (a server's): a step missing from the cache is
compiled in another process while they run eagerly, and loaded on a thread of its own once stored
(`decoding.packages`, `decoding.cache.alongside`). The server reaches that machinery only here."""

from aiayn.decoding import packages
from aiayn.decoding.cache.alongside import alongside

wait_for_compiles = packages.wait_for_compiles  # (wait) for this thread's searches
not_waited_for = packages.not_waited_for  # how many steps this thread's searches did not wait for


def under_way() -> bool:
    """Whether steps are being compiled by processes of ours, or loaded aside, now."""
    return alongside.busy() or packages.loading_aside() > 0
