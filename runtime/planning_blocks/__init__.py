"""Planning blocks: the planning protocol's rules and mechanics, normalizing, thinking, commands."""
