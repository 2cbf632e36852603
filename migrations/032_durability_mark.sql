-- A row whose only use is to be locked (FOR KEY SHARE) by a write that stored nothing new, so that its commit
-- writes WAL and waits for the synchronous standbys like any other write (src/events/durableRepeats.ts): a
-- batch answered "duplicate" is then acknowledged only once its first copy, committed earlier, is as durable
-- as a new write. Lockers of KEY SHARE never wait for one another.
CREATE TABLE durability_mark (
  id smallint PRIMARY KEY CHECK (id = 1)
);
INSERT INTO durability_mark (id) VALUES (1);
