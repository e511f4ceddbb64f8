/* A VFS over SQLite's own that writes each commit's WAL frames with one pwrite.
 *
 * SQLite appends a frame to the WAL in two writes, its 24-byte header and then its page, so
 * a batch costs two pwrite calls on the event loop for every page it changed. Here the WAL
 * file's writes that append to what is already held are gathered in a buffer and written in
 * one call:
 *
 * - when the page of a commit frame (a frame whose header names a database size: the last
 *   frame of a transaction) has been gathered, inside that write, so that an error (a full
 *   disk) is that write's error and fails the COMMIT exactly as before;
 * - before anything that must see the file as written: a read, a sync, a truncation, its
 *   size, a file control, its close, and a write elsewhere in the file (which is then
 *   written through);
 * - when the buffer is full (a transaction larger than it);
 * - at the database file's shared-memory barrier, which SQLite passes before it publishes
 *   new frames to other connections. By then the commit frame has already flushed them;
 *   this is a second guard, whose error could not be returned (the barrier returns
 *   nothing) and so is kept and returned by the next operation on the WAL.
 *
 * So the file holds, at every point where SQLite or another connection could look, exactly
 * what it would hold without the buffer, and an acknowledged commit's frames are in the file
 * before the sync thread (store_sync.c) syncs it. A crash loses only frames that were never
 * committed, as a crash mid-commit would. The database file and every other file pass
 * straight through. */
#include <string.h>

#include "server/store/store_internal.h"

#define WAL_FRAME_HDR 24
/* The unix VFS writes at most 0x1ffff bytes in one call (seekAndWriteFd masks the length
 * with it) and calls a write that it cut short a full disk: the buffer stays below. */
#define WAL_BUF_MAX 0x1ffff

struct vfile {
	sqlite3_file base;   /* our methods */
	sqlite3_file *under; /* the underlying VFS's file, allocated right after this one */
	int wal;             /* a WAL file: writes are gathered */
	struct vfile *peer;  /* for a database file, its WAL file while that is open */
	struct vfile *db;    /* for a WAL file, its database file */
	/* The gathered writes: len bytes that belong at offset off. */
	unsigned char *buf;
	sqlite3_int64 off;
	int len;
	int commit_next; /* the last header gathered was a commit frame's: flush after its page */
	int deferred_rc; /* a flush that failed where nothing could be returned */
	/* For a database file: its commits' WAL syncs are left to the sync thread
	 * (STORE_FCNTL_SYNC_LATER). For a WAL file: the last write ended a commit frame, so a
	 * sync now is that commit's; and the syncs passed on and left out. */
	int sync_later;
	int commit_written;
	int64_t syncs, syncs_left;
};

static sqlite3_vfs gwb_vfs;
static sqlite3_vfs *under_vfs;

static int wal_flush(struct vfile *f)
{
	int rc = f->deferred_rc;
	f->deferred_rc = SQLITE_OK;
	if (f->len > 0) {
		int wrc = f->under->pMethods->xWrite(f->under, f->buf, f->len, f->off);
		f->len = 0;
		if (rc == SQLITE_OK)
			rc = wrc;
	}
	return rc;
}

/* Flushes a WAL file before an operation that must see it written. */
#define FLUSHED(f)                                                                                 \
	do {                                                                                       \
		if ((f)->wal) {                                                                    \
			int frc_ = wal_flush(f);                                                   \
			if (frc_ != SQLITE_OK)                                                     \
				return frc_;                                                       \
		}                                                                                  \
	} while (0)

static int v_close(sqlite3_file *p)
{
	struct vfile *f = (struct vfile *)p;
	int rc = f->wal ? wal_flush(f) : SQLITE_OK;
	if (f->wal && f->db)
		f->db->peer = NULL;
	if (!f->wal && f->peer)
		f->peer->db = NULL;
	sqlite3_free(f->buf);
	f->buf = NULL;
	int crc = f->under->pMethods ? f->under->pMethods->xClose(f->under) : SQLITE_OK;
	return rc != SQLITE_OK ? rc : crc;
}

static int v_read(sqlite3_file *p, void *out, int amt, sqlite3_int64 off)
{
	struct vfile *f = (struct vfile *)p;
	FLUSHED(f);
	return f->under->pMethods->xRead(f->under, out, amt, off);
}

static int v_write(sqlite3_file *p, const void *data, int amt, sqlite3_int64 off)
{
	struct vfile *f = (struct vfile *)p;
	if (!f->wal)
		return f->under->pMethods->xWrite(f->under, data, amt, off);
	f->commit_written = 0;
	if (f->len > 0 && (off != f->off + f->len || f->len + amt > WAL_BUF_MAX)) {
		int rc = wal_flush(f);
		if (rc != SQLITE_OK)
			return rc;
	}
	if (amt > WAL_BUF_MAX) {
		f->commit_next = 0;
		int rc = wal_flush(f);
		return rc != SQLITE_OK ? rc : f->under->pMethods->xWrite(f->under, data, amt, off);
	}
	if (f->len == 0)
		f->off = off;
	memcpy(f->buf + f->len, data, (size_t)amt);
	f->len += amt;
	if (amt == WAL_FRAME_HDR) {
		/* A frame header: bytes 4-7 hold the database's size in pages after a commit,
		 * and 0 in every other frame. */
		const unsigned char *h = data;
		f->commit_next = (h[4] | h[5] | h[6] | h[7]) != 0;
		return SQLITE_OK;
	}
	if (f->commit_next) {
		f->commit_next = 0;
		f->commit_written = 1;
		return wal_flush(f);
	}
	return SQLITE_OK;
}

static int v_truncate(sqlite3_file *p, sqlite3_int64 size)
{
	struct vfile *f = (struct vfile *)p;
	FLUSHED(f);
	return f->under->pMethods->xTruncate(f->under, size);
}

/* A WAL file's sync right after a commit frame, when its database file's commits are synced
 * later, is left out: the commit is published unsynced, as synchronous=NORMAL would have it,
 * and the sync thread makes it durable (store_sync.c). Every other sync is passed on: a
 * checkpoint's, the WAL header's after a restart (its write came after the commit frame),
 * and any commit's while the flag is off. */
static int v_sync(sqlite3_file *p, int flags)
{
	struct vfile *f = (struct vfile *)p;
	FLUSHED(f);
	if (f->wal) {
		int later = f->commit_written && f->db && f->db->sync_later;
		f->commit_written = 0;
		if (later) {
			f->syncs_left++;
			return SQLITE_OK;
		}
		f->syncs++;
	}
	return f->under->pMethods->xSync(f->under, flags);
}

static int v_file_size(sqlite3_file *p, sqlite3_int64 *size)
{
	struct vfile *f = (struct vfile *)p;
	FLUSHED(f);
	return f->under->pMethods->xFileSize(f->under, size);
}

static int v_lock(sqlite3_file *p, int lock)
{
	struct vfile *f = (struct vfile *)p;
	return f->under->pMethods->xLock(f->under, lock);
}

static int v_unlock(sqlite3_file *p, int lock)
{
	struct vfile *f = (struct vfile *)p;
	return f->under->pMethods->xUnlock(f->under, lock);
}

static int v_check_reserved(sqlite3_file *p, int *out)
{
	struct vfile *f = (struct vfile *)p;
	return f->under->pMethods->xCheckReservedLock(f->under, out);
}

static int v_file_control(sqlite3_file *p, int op, void *arg)
{
	struct vfile *f = (struct vfile *)p;
	if (op == STORE_FCNTL_SYNC_LATER && !f->wal) {
		f->sync_later = *(const int *)arg;
		return SQLITE_OK;
	}
	if (op == STORE_FCNTL_WAL_SYNCS && !f->wal) {
		int64_t *out = arg;
		out[0] = f->peer ? f->peer->syncs : 0;
		out[1] = f->peer ? f->peer->syncs_left : 0;
		return SQLITE_OK;
	}
	FLUSHED(f);
	return f->under->pMethods->xFileControl(f->under, op, arg);
}

static int v_sector_size(sqlite3_file *p)
{
	struct vfile *f = (struct vfile *)p;
	return f->under->pMethods->xSectorSize(f->under);
}

static int v_device_characteristics(sqlite3_file *p)
{
	struct vfile *f = (struct vfile *)p;
	return f->under->pMethods->xDeviceCharacteristics(f->under);
}

static int v_shm_map(sqlite3_file *p, int region, int size, int extend, void volatile **out)
{
	struct vfile *f = (struct vfile *)p;
	return f->under->pMethods->xShmMap(f->under, region, size, extend, out);
}

static int v_shm_lock(sqlite3_file *p, int offset, int n, int flags)
{
	struct vfile *f = (struct vfile *)p;
	return f->under->pMethods->xShmLock(f->under, offset, n, flags);
}

/* SQLite passes the barrier before it publishes new WAL frames in the shared index. */
static void v_shm_barrier(sqlite3_file *p)
{
	struct vfile *f = (struct vfile *)p;
	if (f->peer && f->peer->len > 0) {
		int rc = wal_flush(f->peer);
		if (rc != SQLITE_OK)
			f->peer->deferred_rc = rc;
	}
	f->under->pMethods->xShmBarrier(f->under);
}

static int v_shm_unmap(sqlite3_file *p, int del)
{
	struct vfile *f = (struct vfile *)p;
	return f->under->pMethods->xShmUnmap(f->under, del);
}

static int v_fetch(sqlite3_file *p, sqlite3_int64 off, int amt, void **out)
{
	struct vfile *f = (struct vfile *)p;
	return f->under->pMethods->xFetch(f->under, off, amt, out);
}

static int v_unfetch(sqlite3_file *p, sqlite3_int64 off, void *ptr)
{
	struct vfile *f = (struct vfile *)p;
	return f->under->pMethods->xUnfetch(f->under, off, ptr);
}

static const sqlite3_io_methods v_methods = {
    3,
    v_close,
    v_read,
    v_write,
    v_truncate,
    v_sync,
    v_file_size,
    v_lock,
    v_unlock,
    v_check_reserved,
    v_file_control,
    v_sector_size,
    v_device_characteristics,
    v_shm_map,
    v_shm_lock,
    v_shm_barrier,
    v_shm_unmap,
    v_fetch,
    v_unfetch,
};

static int v_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *p, int flags, int *out_flags)
{
	(void)vfs;
	struct vfile *f = (struct vfile *)p;
	memset(f, 0, sizeof *f);
	f->under = (sqlite3_file *)(f + 1);
	int rc = under_vfs->xOpen(under_vfs, name, f->under, flags, out_flags);
	if (rc != SQLITE_OK || !f->under->pMethods) {
		/* SQLite calls no method of a file whose open failed (pMethods NULL). */
		if (f->under->pMethods)
			f->under->pMethods->xClose(f->under);
		return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
	}
	/* Our methods are version 3 (shared memory and mmap), as the unix VFS's are: a
	 * lesser underlying file could not stand behind them. */
	if (f->under->pMethods->iVersion < 3) {
		f->under->pMethods->xClose(f->under);
		return SQLITE_CANTOPEN;
	}
	if ((flags & SQLITE_OPEN_WAL) && name) {
		f->buf = sqlite3_malloc(WAL_BUF_MAX);
		if (!f->buf) {
			f->under->pMethods->xClose(f->under);
			return SQLITE_NOMEM;
		}
		f->wal = 1;
		struct vfile *db = (struct vfile *)sqlite3_database_file_object(name);
		if (db && db->base.pMethods == &v_methods) {
			f->db = db;
			db->peer = f;
		}
	}
	p->pMethods = &v_methods;
	return SQLITE_OK;
}

/* The rest is the underlying VFS's. */
static int v_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
	(void)vfs;
	return under_vfs->xDelete(under_vfs, name, sync_dir);
}

static int v_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
	(void)vfs;
	return under_vfs->xAccess(under_vfs, name, flags, out);
}

static int v_full_pathname(sqlite3_vfs *vfs, const char *name, int n, char *out)
{
	(void)vfs;
	return under_vfs->xFullPathname(under_vfs, name, n, out);
}

static void *v_dl_open(sqlite3_vfs *vfs, const char *name)
{
	(void)vfs;
	return under_vfs->xDlOpen(under_vfs, name);
}

static void v_dl_error(sqlite3_vfs *vfs, int n, char *out)
{
	(void)vfs;
	under_vfs->xDlError(under_vfs, n, out);
}

static void (*v_dl_sym(sqlite3_vfs *vfs, void *h, const char *sym))(void)
{
	(void)vfs;
	return under_vfs->xDlSym(under_vfs, h, sym);
}

static void v_dl_close(sqlite3_vfs *vfs, void *h)
{
	(void)vfs;
	under_vfs->xDlClose(under_vfs, h);
}

static int v_randomness(sqlite3_vfs *vfs, int n, char *out)
{
	(void)vfs;
	return under_vfs->xRandomness(under_vfs, n, out);
}

static int v_sleep(sqlite3_vfs *vfs, int us)
{
	(void)vfs;
	return under_vfs->xSleep(under_vfs, us);
}

static int v_current_time(sqlite3_vfs *vfs, double *out)
{
	(void)vfs;
	return under_vfs->xCurrentTime(under_vfs, out);
}

static int v_get_last_error(sqlite3_vfs *vfs, int n, char *out)
{
	(void)vfs;
	return under_vfs->xGetLastError(under_vfs, n, out);
}

static int v_current_time_int64(sqlite3_vfs *vfs, sqlite3_int64 *out)
{
	(void)vfs;
	return under_vfs->xCurrentTimeInt64(under_vfs, out);
}

const char *store_vfs_name(void)
{
	static int registered = -1;
	if (registered < 0) {
		registered = 0;
		under_vfs = sqlite3_vfs_find(NULL);
		if (under_vfs && under_vfs->iVersion >= 2) {
			gwb_vfs = (sqlite3_vfs){
			    .iVersion = 2,
			    .szOsFile = (int)sizeof(struct vfile) + under_vfs->szOsFile,
			    .mxPathname = under_vfs->mxPathname,
			    .zName = "gwb-wal-gather",
			    .xOpen = v_open,
			    .xDelete = v_delete,
			    .xAccess = v_access,
			    .xFullPathname = v_full_pathname,
			    .xDlOpen = v_dl_open,
			    .xDlError = v_dl_error,
			    .xDlSym = v_dl_sym,
			    .xDlClose = v_dl_close,
			    .xRandomness = v_randomness,
			    .xSleep = v_sleep,
			    .xCurrentTime = v_current_time,
			    .xGetLastError = v_get_last_error,
			    .xCurrentTimeInt64 = v_current_time_int64,
			};
			registered = sqlite3_vfs_register(&gwb_vfs, 0) == SQLITE_OK;
		}
	}
	return registered ? gwb_vfs.zName : NULL;
}
