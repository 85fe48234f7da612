from plancontracts.runtime.cli.main import main

raise SystemExit(main())
