"""Session plans: the single to-do plan an agent keeps for a session, through six planning tools."""
