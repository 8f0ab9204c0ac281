\set k random(1, 1000000)
SELECT pg_try_advisory_lock(:k);
SELECT pg_advisory_unlock(:k);
