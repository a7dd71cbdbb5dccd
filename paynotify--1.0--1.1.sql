\echo Use "ALTER EXTENSION paynotify UPDATE TO '1.1'" to load this file. \quit

-- ===== operations (trace, history, retry, purge, stats, anomalies) =====

-- ===== relay (endpoints, deliveries) =====
