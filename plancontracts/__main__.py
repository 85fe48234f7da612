from plancontracts.runtime.cli import main

raise SystemExit(main())
