"""`edgecnn bench`: a model zoo built with seeded weights (zoo, builder), adapters for peer engines
(peers), the interleaved timing loop (runner) and the report (report, chart, machine).

Peer engines are optional and imported only here, lazily; edgecnn itself never imports them."""
