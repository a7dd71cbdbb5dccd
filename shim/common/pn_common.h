/*
 * pn_common.h
 *	  What the shim's programs (cgi/, send/, relay/) share: a growable byte
 *	  buffer, UTF-8 checking and JSON string escaping, one-line logging
 *	  to stderr, the monotonic clock, the stop signals and the daemons'
 *	  settings tables.  Plain C11 and libc only, so every program can link
 *	  it; what needs libpq is in common/pq/, what needs libcurl in
 *	  common/curl/.
 *
 * Allocation failure is reported, never fatal: a buffer that failed to grow
 * stays failed (its contents are then incomplete) and every later append
 * returns false.  A program that has no fallback checks the flag itself.
 */
#ifndef PAYNOTIFY_SHIM_COMMON_H
#define PAYNOTIFY_SHIM_COMMON_H

#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* A growable byte buffer, NUL-terminated once anything was appended. */
typedef struct pn_buf
{
	char	   *data;
	size_t		len;
	size_t		cap;
	bool		failed;
} pn_buf;

/* pn_buf.c */
extern void pn_buf_init(pn_buf *b);
extern bool pn_buf_reserve(pn_buf *b, size_t extra);
extern bool pn_buf_append(pn_buf *b, const void *data, size_t n);
extern bool pn_buf_appendf(pn_buf *b, const char *fmt,...)
			__attribute__((format(printf, 2, 3)));
extern bool pn_buf_vappendf(pn_buf *b, const char *fmt, va_list ap)
			__attribute__((format(printf, 2, 0)));
extern void pn_buf_reset(pn_buf *b);
extern char *pn_buf_steal(pn_buf *b);
extern void pn_buf_free(pn_buf *b);

/* pn_json.c */
extern size_t pn_utf8_len(const char *s, size_t avail);
extern bool pn_json_escape(pn_buf *b, const char *s, size_t n);

/* pn_clock.c */
extern long long pn_now_ms(void);
extern double pn_mono_now(void);

/* pn_log.c */
extern void pn_log_init(const char *program, bool with_pid);
extern void pn_log_set_worker(int worker);
extern void pn_log(const char *fmt,...) __attribute__((format(printf, 1, 2)));
extern void pn_log_text(char *dst, size_t size, const char *src);
extern const char *pn_connect_hint(const char *msg);

/* pn_signal.c */
extern void pn_on_stop_signals(void (*handler) (int));

/* pn_settings.c: a daemon's settings, each an environment variable and a flag */
typedef enum pn_setting_kind
{
	PN_SETTING_STRING,			/* a const char * in the config struct */
	PN_SETTING_NUMBER			/* a long long, from min to max */
} pn_setting_kind;

typedef struct pn_setting
{
	const char *env;
	const char *flag;
	const char *default_value;
	pn_setting_kind kind;
	long long	min;
	long long	max;
	size_t		offset;			/* offsetof(the config struct, field) */
	const char *help;
} pn_setting;

#define PN_SETTING_OPTION 1000	/* getopt_long's val of setting i: this + i */

extern bool pn_identifier_valid(const char *s);
extern bool pn_setting_set(const pn_setting *s, void *cfg, const char *value, bool from_flag);
extern bool pn_settings_load_env(const pn_setting *settings, size_t n, void *cfg,
								 struct option *longopts);
extern void pn_settings_usage_options(FILE *out, const pn_setting *settings, size_t n);
extern void pn_settings_usage_env(FILE *out, const pn_setting *settings, size_t n);

/*
 * A daemon's command line: its settings table and config struct, the
 * settings whose value is checked (the DSN: no password; the schema: a
 * plain identifier, "public" when empty), its usage text, --once.
 */
typedef struct pn_command_line
{
	const char *program;
	const char *version;
	const pn_setting *settings;
	size_t		n;
	void	   *cfg;
	size_t		dsn_offset;
	bool		(*dsn_ok) (const char *dsn);	/* false: it holds a password */
	size_t		schema_offset;
	const char *schema_env;		/* named in the schema's error */
	void		(*usage) (FILE *out);
	bool	   *once;
} pn_command_line;

extern int	pn_settings_load(int argc, char **argv, const pn_command_line *cl);

#endif							/* PAYNOTIFY_SHIM_COMMON_H */
