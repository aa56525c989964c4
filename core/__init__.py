"""The shared vocabulary of Jointline, in plain Python: record types and signal families
(``records``), timestamp normalisation (``timeparse``), label matchers and name globs (``labels``).

Every app imports it; it imports no app and no Django model (an import contract checks this).
"""
