/*-------------------------------------------------------------------------
 *
 * secrets.c
 *	  What the SQL configuration functions check before they store a
 *	  channel or a key, and how they load a secret from a file: a
 *	  gateway's settings (paynotify_check_settings), a key's id and
 *	  material (paynotify_check_key), a secret file in
 *	  paynotify.secrets_directory (paynotify_read_secret).
 *
 * None of them is granted to anyone: the SECURITY DEFINER configuration
 * functions call them.  No message carries a secret or a key's material.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands/dbcommands.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/builtins.h"

#include "paynotify.h"

PG_FUNCTION_INFO_V1(paynotify_check_settings);
PG_FUNCTION_INFO_V1(paynotify_check_key);
PG_FUNCTION_INFO_V1(paynotify_read_secret);

static char *database_directory(const char *dir);

#define MAX_SECRET_FILE (64 * 1024)

/* paynotify_check_settings(gateway text, settings jsonb) returns void */
Datum
paynotify_check_settings(PG_FUNCTION_ARGS)
{
	char	   *gwname = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Jsonb	   *settings = PG_GETARG_JSONB_P(1);
	const PnGateway *gw = pn_gateway_lookup(gwname);

	if (gw == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown gateway \"%s\"", gwname),
				 errhint("Gateways are %s.", pn_gateway_names())));
	if (!JB_ROOT_IS_OBJECT(settings))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("settings must be a JSON object")));
	(void) gw->load_settings(settings);
	PG_RETURN_VOID();
}

/*
 * paynotify_check_key(gateway text, key_id text, material text) returns text
 *
 * Public-key gateways: a PEM public key, an X.509 certificate, or bare
 * base64 of a SubjectPublicKeyInfo (as Alipay's console shows it), which is
 * returned wrapped in PEM.  Secret gateways: the secret as given.
 */
Datum
paynotify_check_key(PG_FUNCTION_ARGS)
{
	const PnGateway *gw = pn_gateway_lookup(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	char	   *key_id = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *material = text_to_cstring(PG_GETARG_TEXT_PP(2));

	if (gw == NULL)
		elog(ERROR, "paynotify: unknown gateway");
	if (key_id[0] == '\0' || strlen(key_id) > 128 ||
		!pg_verify_mbstr(PG_SQL_ASCII, key_id, strlen(key_id), true))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key id must be 1 to 128 characters")));
	if (gw->public_keys)
	{
		const char *err;
		void	   *pkey;
		char	   *trimmed = material;

		while (*trimmed == ' ' || *trimmed == '\n' || *trimmed == '\r' || *trimmed == '\t')
			trimmed++;
		if (strncmp(trimmed, "-----BEGIN", 10) != 0)
		{
			StringInfoData pem;
			int			len = strlen(trimmed);

			while (len > 0 && strchr(" \r\n\t", trimmed[len - 1]))
				len--;
			initStringInfo(&pem);
			appendStringInfoString(&pem, "-----BEGIN PUBLIC KEY-----\n");
			for (int i = 0; i < len; i += 64)
				appendStringInfo(&pem, "%.*s\n", Min(64, len - i), trimmed + i);
			appendStringInfoString(&pem, "-----END PUBLIC KEY-----\n");
			material = pem.data;
		}
		pkey = pn_pkey_load(material, strlen(material), &err);
		if (pkey == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid key material for key \"%s\": %s", key_id, err),
					 errhint("Give a PEM public key (-----BEGIN PUBLIC KEY-----) or an X.509 certificate.")));
		pn_pkey_free(pkey);
	}
	if (gw->check_key)
		gw->check_key(key_id, material);
	PG_RETURN_TEXT_P(cstring_to_text(material));
}

/*
 * dir/<this database's name>, the directory its secret files are in; an
 * error when the name cannot name a directory (a '/', "." or "..").
 */
static char *
database_directory(const char *dir)
{
	char	   *db = get_database_name(MyDatabaseId);

	if (db == NULL || db[0] == '\0' || strchr(db, '/') != NULL ||
		strcmp(db, ".") == 0 || strcmp(db, "..") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("paynotify: this database's name cannot name a directory of paynotify.secrets_directory")));
	return psprintf("%s/%s", dir, db);
}

/*
 * paynotify_read_secret(filename text) returns text
 *
 * The contents of a file in this database's directory of
 * paynotify.secrets_directory (the subdirectory named after the database:
 * the setting is the cluster's, and an operator of one database must not
 * load another database's secrets), without trailing white space: how the
 * *_file configuration functions load secrets without their text ever
 * being part of a statement (and so of the server log).  Only a plain file
 * name is accepted; the file, after following symbolic links, must be a
 * readable regular file inside that directory, at most 64 kB of UTF-8.  Read by the server process; never granted to anyone: the
 * SECURITY DEFINER configuration functions call it.  Messages name the
 * file, never its contents.
 */
Datum
paynotify_read_secret(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	const char *dir = paynotify_secrets_directory;
	char	   *path;
	char		dirreal[PATH_MAX];
	char		filereal[PATH_MAX];
	size_t		dirlen;
	struct stat st;
	int			fd;
	char	   *buf;
	size_t		len = 0;
	text	   *result;

	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("paynotify: only a superuser may read secret files")));
	if (dir == NULL || dir[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("paynotify: paynotify.secrets_directory is not set"),
				 errhint("A superuser sets it (postgresql.conf or ALTER SYSTEM) to the directory holding the secret files.")));
	if (!is_absolute_path(dir))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("paynotify: paynotify.secrets_directory must be an absolute path")));
	if (name[0] == '\0' || strlen(name) > 255 || strchr(name, '/') != NULL ||
		strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("paynotify: \"%s\" is not a file name in paynotify.secrets_directory", name),
				 errhint("Give the name of a file directly inside the directory, without any path.")));
	if (realpath(database_directory(dir), dirreal) == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("paynotify: could not find this database's directory \"%s\" in paynotify.secrets_directory: %m",
						get_database_name(MyDatabaseId)),
				 errhint("Each database reads its secret files from the directory named after it inside paynotify.secrets_directory.")));
	path = psprintf("%s/%s", dirreal, name);
	if (realpath(path, filereal) == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("paynotify: could not find secret file \"%s\" in paynotify.secrets_directory: %m",
						name)));
	dirlen = strlen(dirreal);
	if (strncmp(filereal, dirreal, dirlen) != 0 || filereal[dirlen] != '/')
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("paynotify: secret file \"%s\" is a link to a file outside paynotify.secrets_directory",
						name)));

	fd = OpenTransientFile(filereal, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | PG_BINARY);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("paynotify: could not open secret file \"%s\": %m", name)));
	if (fstat(fd, &st) != 0)
	{
		int			save_errno = errno;

		CloseTransientFile(fd);
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("paynotify: could not read secret file \"%s\": %m", name)));
	}
	if (!S_ISREG(st.st_mode) || st.st_size > MAX_SECRET_FILE)
	{
		bool		regular = S_ISREG(st.st_mode);

		CloseTransientFile(fd);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("paynotify: secret file \"%s\" is %s", name,
						regular ? "larger than 64 kB" : "not a regular file")));
	}
	buf = palloc(st.st_size + 1);
	while (len < (size_t) st.st_size)
	{
		ssize_t		n = read(fd, buf + len, st.st_size - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
		{
			int			save_errno = errno;

			explicit_bzero(buf, len);
			CloseTransientFile(fd);
			errno = save_errno;
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("paynotify: could not read secret file \"%s\": %m", name)));
		}
		if (n == 0)
			break;
		len += n;
	}
	CloseTransientFile(fd);
	while (len > 0 && strchr(" \t\r\n", buf[len - 1]) != NULL)
		len--;
	buf[len] = '\0';
	if (len == 0 || memchr(buf, '\0', len) != NULL ||
		!pg_verify_mbstr(PG_UTF8, buf, len, true))
	{
		explicit_bzero(buf, len);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("paynotify: secret file \"%s\" is %s", name,
						len == 0 ? "empty" : "not UTF-8 text")));
	}
	result = cstring_to_text_with_len(buf, len);
	explicit_bzero(buf, len);
	pfree(buf);
	PG_RETURN_TEXT_P(result);
}
