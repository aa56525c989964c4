"""The war room: its page, lanes, catalogue and the read API it draws from."""
