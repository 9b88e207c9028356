"""The evaluation wing: how well the engine (and published baselines) diagnose generated
scenarios, judged against each scenario's truth.

    scenarios  run the engine or the baselines on one generated scenario folder
    score      match incidents to the injected faults; precision, recall, top-k, delay
    baselines  BARO and N-Sigma, fed the engine's features (the comparison's yardstick)
    report     the classic suite's run and docs/accuracy-classic.md
    split_report  a realistic split's run and docs/accuracy.md (the test split's figures)

Nothing in the diagnosis imports this package.
"""
