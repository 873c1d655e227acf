"""Floor 1, reply checks: the text on its way to and from a model. A passage escaped before it is
sent (passage_escape), a question reply cleaned or rejected (hygiene), a grade reply read (grades)."""
