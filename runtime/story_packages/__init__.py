"""Story packages: the visual-novel planner's contracts, rules, draft session and commands."""
