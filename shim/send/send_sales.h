/*
 * send_sales.h
 *		The sales files (--sales) read back by --mode serve: every sale of
 *		every file, read again when a file changed (send_sales.c).
 */
#ifndef PAYNOTIFY_SEND_SALES_H
#define PAYNOTIFY_SEND_SALES_H

#include "send.h"

#define PN_MAX_SALES_FILES	32

struct pn_sales
{
	int			n_files;
	char	   *file[PN_MAX_SALES_FILES];
	long long	sig[PN_MAX_SALES_FILES][3];	/* size, mtime (ns), inode */
	bool		loaded;
	struct pn_sale *v;			/* in file order, files in the order given */
	size_t		n;
	size_t		cap;
	size_t		bad_lines;		/* lines that are not sales, skipped */
};

void		pn_sales_init(struct pn_sales *s, const char *files);
int			pn_sales_refresh(struct pn_sales *s);
void		pn_sales_free(struct pn_sales *s);

#endif							/* PAYNOTIFY_SEND_SALES_H */
