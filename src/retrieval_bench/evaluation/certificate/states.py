"""The certificate's three states and the number each is in metrics/headline.json (which holds
numbers only). Apart from the verdict's tests so that the score stage, which writes a system's
headline, does not import scipy (about 0.4 CPU-s a system)."""

AGREES, DISAGREES, UNDETERMINED = "agrees", "disagrees", "undetermined"
VERDICT_NUMBER = {AGREES: 1, UNDETERMINED: 0, DISAGREES: -1}
