"""llmdeck.evals: real agents on coding tasks with hidden tests, tied to the serving configuration."""
