-- The state machine: an editable whitelist, conditional moves, and a
-- trigger that guards the orders table against any illegal change.
\set VERBOSITY sqlstate
SET search_path = pay, public;

SELECT from_state, to_state FROM paynotify_transition ORDER BY 1, 2;

SELECT t.set_order('S1', 'pending');
SELECT paynotify_transit('S1', 'pending', 'paid') AS moved;
SELECT paynotify_transit('S1', 'pending', 'paid') AS moved_again;
SELECT status FROM orders WHERE order_no = 'S1';
-- not in from_state: false; no such order: false
SELECT paynotify_transit('S1', 'refunding', 'refunded') AS wrong_from;
SELECT paynotify_transit('nope', 'pending', 'paid') AS no_order;
-- illegal: an error naming both states
\set VERBOSITY default
SELECT paynotify_transit('S1', 'paid', 'pending');
SELECT paynotify_transit('S1', 'paid', 'completed');
-- the trigger stops the same from any code path
UPDATE orders SET status = 'pending' WHERE order_no = 'S1';
UPDATE orders SET status = NULL WHERE order_no = 'S1';
\set VERBOSITY sqlstate
UPDATE orders SET status = 'shipped' WHERE order_no = 'S1';
UPDATE orders SET amount_fen = 1 WHERE order_no = 'S1';
SELECT status, amount_fen FROM orders WHERE order_no = 'S1';

-- the whitelist is the DBA's: edits take effect at once, in this and other sessions
UPDATE orders SET status = 'completed' WHERE order_no = 'S1';
INSERT INTO paynotify_transition VALUES ('shipped', 'completed');
UPDATE orders SET status = 'completed' WHERE order_no = 'S1';
DELETE FROM paynotify_transition WHERE from_state = 'shipped' AND to_state = 'completed';
SELECT t.set_order('S1', 'shipped');
UPDATE orders SET status = 'completed' WHERE order_no = 'S1';

-- a trigger argument names the status column of another table
CREATE TABLE public.tickets (id int PRIMARY KEY, phase text);
CREATE TRIGGER tickets_guard BEFORE UPDATE ON public.tickets
	FOR EACH ROW EXECUTE FUNCTION paynotify_guard_transition('phase');
INSERT INTO public.tickets VALUES (1, 'pending');
UPDATE public.tickets SET phase = 'cancelled';
UPDATE public.tickets SET phase = 'paid';
-- misuse of the trigger function is an error, not a crash
CREATE TRIGGER tickets_bad AFTER INSERT ON public.tickets
	FOR EACH ROW EXECUTE FUNCTION paynotify_guard_transition('phase');
INSERT INTO public.tickets VALUES (2, 'pending');
DROP TABLE public.tickets;
DELETE FROM orders WHERE order_no = 'S1';
