/*
 * send_dump.c
 *		--dump-dir and --dump-sql: every request the generator makes,
 *		written out (a folder per request, or one SQL line each) for replay
 *		by other tools; nothing is sent.
 */
#include "send_run.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

static int
mkdir_p(const char *path)
{
	char		tmp[4096];

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++)
	{
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
		return -1;
	return 0;
}

static int
write_file(const char *path, const void *p, size_t n)
{
	FILE	   *f = fopen(path, "wb");

	if (!f)
		return -1;
	if (fwrite(p, 1, n, f) != n)
	{
		fclose(f);
		return -1;
	}
	return fclose(f);
}

/* Appends text as a SQL string literal ('' doubling; standard strings). */
static void
sql_literal(struct pn_buf *b, const char *s, size_t n)
{
	pn_buf_putc(b, '\'');
	for (size_t i = 0; i < n; i++)
	{
		if (s[i] == '\'')
			pn_buf_putc(b, '\'');
		pn_buf_putc(b, s[i]);
	}
	pn_buf_putc(b, '\'');
}

/* One line: SELECT outcome FROM paynotify_handle('<ch>', '<json>'::jsonb, '\x..'::bytea); */
static void
sql_line(struct pn_buf *b, const char *channel, const struct pn_req *r)
{
	struct pn_buf js;
	struct pn_json j;
	char		hx[3];

	pn_buf_init(&js);
	pn_json_init(&j, &js, false);
	pn_json_open(&j, NULL, '{');
	for (int i = 0; i < r->nh; i++)
		pn_json_str(&j, r->hname[i], r->hval[i]);
	pn_json_close(&j, '}');
	pn_buf_puts(b, "SELECT outcome FROM paynotify_handle(");
	sql_literal(b, channel, strlen(channel));
	pn_buf_puts(b, ", ");
	sql_literal(b, js.data, js.len);
	pn_buf_puts(b, "::jsonb, '\\x");
	for (size_t i = 0; i < r->body_len; i++)
	{
		pn_hex((const unsigned char *) r->body + i, 1, hx, PN_HEX_LOWER);
		pn_buf_put(b, hx, 2);
	}
	pn_buf_puts(b, "'::bytea);\n");
	pn_buf_free(&js);
}

/* headers.txt + body.json|body.form in DIR/NNNNNN/, one index.tsv line. */
static int
dump_dir_one(const struct run *run, size_t seq, const struct pn_req *r, FILE *index)
{
	char		dir[4096],
				path[4200];
	struct pn_buf h;
	int			rc;

	snprintf(dir, sizeof(dir), "%s/%06zu", run->o->dump_dir, seq);
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return -1;
	pn_buf_init(&h);
	for (int i = 0; i < r->nh; i++)
		pn_buf_printf(&h, "%s: %s\n", r->hname[i], r->hval[i]);
	snprintf(path, sizeof(path), "%s/headers.txt", dir);
	rc = write_file(path, h.data, h.len);
	pn_buf_free(&h);
	snprintf(path, sizeof(path), "%s/%s", dir,
			 run->conf->gateway == PN_ALIPAY ? "body.form" : "body.json");
	if (rc == 0)
		rc = write_file(path, r->body, r->body_len);
	fprintf(index, "%06zu\t%s\t%s\t%s\t%s\t%s\t%u\n", seq, gateway_names[run->conf->gateway],
			event_names[run->conf->event], pn_bad_names[r->bad], r->order_no,
			r->notify_id, r->attempt + 1);
	return rc;
}

/* Writes every request the generator makes; sends nothing. */
int
run_dump(struct run *run, const char *channel)
{
	const struct opts *o = run->o;
	FILE	   *index = NULL,
			   *sql = NULL;
	struct pn_buf line;
	struct pn_req *r;
	bool		more;
	size_t		seq = 0;
	int			rc = 0;
	char		path[4200];

	if (o->dump_dir)
	{
		snprintf(path, sizeof(path), "%s/index.tsv", o->dump_dir);
		if (mkdir_p(o->dump_dir) != 0 || !(index = fopen(path, "w")))
		{
			pn_log("cannot write to \"%s\": %s", o->dump_dir, strerror(errno));
			return 1;
		}
		fputs("seq\tgateway\tevent\tbad\torder_no\tnotify_id\tdelivery\n", index);
	}
	if (o->dump_sql)
	{
		sql = strcmp(o->dump_sql, "-") == 0 ? stdout : fopen(o->dump_sql, "w");
		if (!sql)
		{
			pn_log("cannot write \"%s\": %s", o->dump_sql, strerror(errno));
			if (index)
				fclose(index);
			return 1;
		}
	}
	pn_buf_init(&line);
	while (rc == 0 && !stop_flag && (r = run->shared_req ? (seq < run->planned ? run->shared_req : NULL)
									 : pn_gen_take(run->gen, true, &more)) != NULL)
	{
		if (run_take_sale(run, r))
		{
			if (r->shared)
				break;
			pn_req_free(r);		/* dropped: not written */
			continue;
		}
		if (r->shared)
			r->shared_seen = true;
		seq++;
		if (index && dump_dir_one(run, seq, r, index) != 0)
		{
			pn_log("cannot write under \"%s\": %s", o->dump_dir, strerror(errno));
			rc = 1;
		}
		if (sql)
		{
			pn_buf_reset(&line);
			sql_line(&line, channel, r);
			if (fwrite(line.data, 1, line.len, sql) != line.len)
				rc = 1;
		}
		if (!r->shared)
			pn_req_free(r);
		if (!o->quiet && seq % 10000 == 0)
			fprintf(stderr, "[dump] %zu/%zu written\n", seq, run->planned);
	}
	pn_buf_free(&line);
	if (index && fclose(index) != 0)
		rc = 1;
	if (sql == stdout)
		fflush(stdout);
	else if (sql && fclose(sql) != 0)
		rc = 1;
	run->finished = seq;
	if (run->sales_failed)
		rc = 1;
	return rc ? 1 : (stop_flag ? 1 : 0);
}

