"""``python -m h5vc.cli``: the ``h5vc`` command."""

from h5vc.cli import main

raise SystemExit(main())
