/*
 * replay_main.c - runs a libFuzzer target's function over every file of
 * its checked-in corpus, so a normal (non-fuzz) ctest run keeps the corpus
 * passing. Usage: replay DIR... ; with no argument, the directories named
 * in COHORT_FUZZ_CORPUS (':'-separated) are used.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: cannot open %s\n", dir);
        return -1;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        static uint8_t buf[1 << 20];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, len);
        n++;
    }
    closedir(d);
    printf("replay: %d inputs from %s\n", n, dir);
    return n;
}

int main(int argc, char **argv)
{
    int total = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++) {
            int n = replay_dir(argv[i]);
            if (n < 0)
                return 2;
            total += n;
        }
    } else {
        const char *env = getenv("COHORT_FUZZ_CORPUS");
        if (!env) {
            fprintf(stderr, "usage: replay DIR...\n");
            return 2;
        }
        char *dup = strdup(env), *save = NULL;
        for (char *p = strtok_r(dup, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
            int n = replay_dir(p);
            if (n < 0)
                return 2;
            total += n;
        }
        free(dup);
    }
    /* An empty corpus would make this test pass vacuously. */
    return total > 0 ? 0 : 1;
}
