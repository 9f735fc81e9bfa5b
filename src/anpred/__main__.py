"""``python -m anpred`` runs the CLI."""

from anpred.cli.main import main

raise SystemExit(main())
