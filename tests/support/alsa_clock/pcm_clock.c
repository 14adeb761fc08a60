/* A sound card with a clock, for the tests: an alsa-lib I/O plugin (ioplug) that plays
 * S16_LE frames in real time, as a card does, and records what it played.
 *
 * The hardware pointer advances with CLOCK_MONOTONIC from the moment the stream starts, so
 * snd_pcm_delay() and snd_pcm_avail() tell the truth, and a writer that falls behind gets an
 * underrun (-EPIPE). Each frame is appended to the file `file` when it is played (frames
 * dropped unplayed never reach it), and each start appends one line to `file`.starts:
 * "<CLOCK_REALTIME seconds at the start> <frames in the file before it> <rate>", so the
 * frame at file position n of that run was due at the speaker at start + (n - frames) / rate.
 *
 *   pcm_type.clock { lib "/path/libasound_module_pcm_clock.so" }
 *   pcm.card { type clock file "/path/out.raw" }
 *
 * Built by the tests (tests/support/clock_card.py) with gcc and libasound2-dev (-DPIC: as a
 * loadable module, not linked into a static alsa-lib).
 */
#include <alsa/asoundlib.h>
#include <alsa/pcm_external.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

typedef struct {
	snd_pcm_ioplug_t io;
	int out_fd;
	FILE *starts;
	unsigned char *ring;
	size_t frame_bytes;
	snd_pcm_uframes_t queued;   /* frames transferred since prepare */
	snd_pcm_uframes_t played;   /* frames played since prepare */
	snd_pcm_uframes_t run_base; /* `played` when the stream last started */
	unsigned long long file_frames;
	struct timespec t0;
	int running;
} clock_card_t;

static double since(const struct timespec *t0)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

static void emit(clock_card_t *c, snd_pcm_uframes_t upto)
{
	snd_pcm_uframes_t size = c->io.buffer_size;
	while (c->played < upto) {
		snd_pcm_uframes_t at = c->played % size;
		snd_pcm_uframes_t n = upto - c->played;
		if (n > size - at)
			n = size - at;
		ssize_t w = write(c->out_fd, c->ring + at * c->frame_bytes, n * c->frame_bytes);
		(void)w;
		c->played += n;
		c->file_frames += n;
	}
}

static int clock_start(snd_pcm_ioplug_t *io)
{
	clock_card_t *c = io->private_data;
	struct timespec real;
	clock_gettime(CLOCK_MONOTONIC, &c->t0);
	clock_gettime(CLOCK_REALTIME, &real);
	c->run_base = c->played;
	c->running = 1;
	fprintf(c->starts, "%lld.%09ld %llu %u\n", (long long)real.tv_sec, real.tv_nsec,
		c->file_frames, io->rate);
	fflush(c->starts);
	return 0;
}

static int clock_stop(snd_pcm_ioplug_t *io)
{
	clock_card_t *c = io->private_data;
	if (c->running) {  /* what was due until now has played; the rest is dropped */
		snd_pcm_uframes_t due = c->run_base + (snd_pcm_uframes_t)(since(&c->t0) * io->rate);
		emit(c, due < c->queued ? due : c->queued);
	}
	c->running = 0;
	return 0;
}

static snd_pcm_sframes_t clock_pointer(snd_pcm_ioplug_t *io)
{
	clock_card_t *c = io->private_data;
	if (c->running) {
		snd_pcm_uframes_t due = c->run_base + (snd_pcm_uframes_t)(since(&c->t0) * io->rate);
		if (due > c->queued) {  /* the writer fell behind: an underrun */
			emit(c, c->queued);
			c->running = 0;
			return -EPIPE;
		}
		emit(c, due);
	}
	return c->played % io->buffer_size;
}

static snd_pcm_sframes_t clock_transfer(snd_pcm_ioplug_t *io, const snd_pcm_channel_area_t *areas,
					snd_pcm_uframes_t offset, snd_pcm_uframes_t size)
{
	clock_card_t *c = io->private_data;
	const unsigned char *src = (const unsigned char *)areas[0].addr
		+ (areas[0].first + offset * areas[0].step) / 8;
	snd_pcm_uframes_t done = 0;
	while (done < size) {
		snd_pcm_uframes_t at = (c->queued + done) % io->buffer_size;
		snd_pcm_uframes_t n = size - done;
		if (n > io->buffer_size - at)
			n = io->buffer_size - at;
		memcpy(c->ring + at * c->frame_bytes, src + done * c->frame_bytes, n * c->frame_bytes);
		done += n;
	}
	c->queued += size;
	return size;
}

static int clock_prepare(snd_pcm_ioplug_t *io)
{
	clock_card_t *c = io->private_data;
	c->queued = c->played = c->run_base = 0;
	c->running = 0;
	return 0;
}

static int clock_hw_params(snd_pcm_ioplug_t *io, snd_pcm_hw_params_t *params)
{
	clock_card_t *c = io->private_data;
	(void)params;
	c->frame_bytes = 2 * io->channels;
	free(c->ring);
	c->ring = calloc(io->buffer_size, c->frame_bytes);
	return c->ring ? 0 : -ENOMEM;
}

static int clock_close(snd_pcm_ioplug_t *io)
{
	clock_card_t *c = io->private_data;
	close(c->out_fd);
	close(io->poll_fd);
	fclose(c->starts);
	free(c->ring);
	free(c);
	return 0;
}

static const snd_pcm_ioplug_callback_t clock_callback = {
	.start = clock_start,
	.stop = clock_stop,
	.pointer = clock_pointer,
	.transfer = clock_transfer,
	.prepare = clock_prepare,
	.hw_params = clock_hw_params,
	.close = clock_close,
};

static int set_constraints(snd_pcm_ioplug_t *io)
{
	static const unsigned int access[] = { SND_PCM_ACCESS_RW_INTERLEAVED };
	static const unsigned int formats[] = { SND_PCM_FORMAT_S16_LE };
	int err;
	if ((err = snd_pcm_ioplug_set_param_list(io, SND_PCM_IOPLUG_HW_ACCESS, 1, access)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_list(io, SND_PCM_IOPLUG_HW_FORMAT, 1, formats)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_CHANNELS, 1, 8)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_RATE, 8000, 192000)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_PERIOD_BYTES,
						   128, 1 << 20)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_PERIODS, 2, 64)) < 0)
		return err;
	return 0;
}

SND_PCM_PLUGIN_DEFINE_FUNC(clock)
{
	snd_config_iterator_t i, next;
	const char *file = NULL;
	char starts[4096];
	clock_card_t *c;
	int err;
	(void)root;
	snd_config_for_each(i, next, conf) {
		snd_config_t *n = snd_config_iterator_entry(i);
		const char *id;
		if (snd_config_get_id(n, &id) < 0)
			continue;
		if (!strcmp(id, "comment") || !strcmp(id, "type") || !strcmp(id, "hint"))
			continue;
		if (!strcmp(id, "file") && snd_config_get_string(n, &file) == 0)
			continue;
		SNDERR("unknown field %s", id);
		return -EINVAL;
	}
	if (!file || stream != SND_PCM_STREAM_PLAYBACK)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	snprintf(starts, sizeof(starts), "%s.starts", file);
	c->out_fd = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	c->starts = fopen(starts, "ae");
	if (c->out_fd < 0 || !c->starts) {
		free(c);
		return -errno;
	}
	c->io.version = SND_PCM_IOPLUG_VERSION;
	c->io.name = "clock card (tests)";
	c->io.flags = SND_PCM_IOPLUG_FLAG_MONOTONIC;
	c->io.callback = &clock_callback;
	c->io.private_data = c;
	c->io.poll_fd = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);
	c->io.poll_events = POLLOUT;
	c->io.mmap_rw = 0;
	if ((err = snd_pcm_ioplug_create(&c->io, name, stream, mode)) < 0) {
		close(c->out_fd);
		fclose(c->starts);
		free(c);
		return err;
	}
	if ((err = set_constraints(&c->io)) < 0) {
		snd_pcm_ioplug_delete(&c->io);
		return err;
	}
	*pcmp = c->io.pcm;
	return 0;
}

SND_PCM_PLUGIN_SYMBOL(clock);
