"""Text helpers: what a text is made of, read one way by every rule that asks. The
scripts of its letters (`scripts`), its language and a language's words (`language`:
wordfreq and lingua), the languages a request names (`language_names`), prose against
structured data (`prose`), what a reader sees (`visible`), a request's codes in any
written form (`code_forms`) and values of a type however written (`typed_values`). They
judge nothing: a text helper imports other text helpers and the load generator's shared
contracts, never a rule, the gate or `findings` (the layers drawn in `loadgen.judge`)."""
