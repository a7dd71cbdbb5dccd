/*
 * pipeline_commit CONNINFO SQL... : the statements but the last in one
 * libpq pipeline (extended protocol, one Sync: one transaction, no
 * transaction block), then the last alone.  Prints each statement's first
 * value (or its command tag, or its error), one line each.
 */
#include <stdio.h>
#include <libpq-fe.h>

static void
print_results(PGconn *c, int i)
{
	PGresult   *r;

	while ((r = PQgetResult(c)) != NULL)
	{
		ExecStatusType st = PQresultStatus(r);

		if (st == PGRES_TUPLES_OK && PQntuples(r) > 0)
			printf("%d: %s\n", i, PQgetvalue(r, 0, 0));
		else if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
			printf("%d: %s\n", i, PQcmdStatus(r));
		else if (st != PGRES_PIPELINE_SYNC)
			printf("%d: error: %s", i, PQresultErrorMessage(r));
		PQclear(r);
	}
}

int
main(int argc, char **argv)
{
	PGconn	   *c;
	PGresult   *r;
	int			n = argc - 2;

	if (argc < 3)
	{
		fprintf(stderr, "usage: %s CONNINFO SQL...\n", argv[0]);
		return 2;
	}
	c = PQconnectdb(argv[1]);
	if (PQstatus(c) != CONNECTION_OK)
	{
		fprintf(stderr, "%s", PQerrorMessage(c));
		return 1;
	}
	if (n > 1)
	{
		if (!PQenterPipelineMode(c))
			return 1;
		for (int i = 0; i < n - 1; i++)
			if (!PQsendQueryParams(c, argv[2 + i], 0, NULL, NULL, NULL, NULL, 0))
				return 1;
		if (!PQpipelineSync(c))
			return 1;
		for (int i = 0; i < n - 1; i++)
			print_results(c, i + 1);
		/* the Sync's result */
		r = PQgetResult(c);
		PQclear(r);
		if (!PQexitPipelineMode(c))
			return 1;
	}
	r = PQexec(c, argv[1 + n]);
	printf("%d: %s\n", n, PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0
		   ? PQgetvalue(r, 0, 0) : PQresultErrorMessage(r));
	PQclear(r);
	PQfinish(c);
	return 0;
}
