/* The floor of fresh namespaces, in C (bench/sandbox.py --floor compiles and runs it where a C compiler is found):
   a resident process that makes each jail with one clone(2) (no bwrap, no exec of a jail maker, no second fork),
   its mounts private, its own /proc and a private /tmp, the jail's user `nobody` (a root helper: by setresuid, or
   root in a user namespace whose root is `nobody` outside), then execs `sh -c COMMAND`. A prototype: no seccomp
   filter, no new root, no binds.

   floor FLAGS USERNS RUNS [COMMAND]; USERNS 2: no user namespace, toolrun's default jail's mounts (toolrun_mounts): RUNS jails (after 3 not counted), one after the other; prints the CPU per jail
   in ms: this process, its reaped children. With COMMAND, what each jail printed goes to stderr. */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static void put(pid_t pid, const char *name, const char *text) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    int fd = open(path, O_WRONLY);
    if (fd < 0 || write(fd, text, strlen(text)) < 0) _exit(90);
    close(fd);
}

static void must(int failed, int code) {
    if (failed) _exit(code);
}

static void ro_bind(const char *from, const char *to) {
    must(mount(from, to, 0, MS_BIND | MS_REC, 0) != 0, 80);
    must(mount(0, to, 0, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID, 0) != 0, 81);
}

/* toolrun's default jail (bwrap's options, exec/sandbox.py jail_args) made by hand: a tmpfs as the new root, /usr
   and /etc read-only, the links into /usr, a root server's /dev folder, /proc with its five covers, read-only, a
   private /tmp, pivot_root, / read-only, and a seccomp filter (allow-all here: one seccomp() call, as bwrap's). */
static void toolrun_mounts(void) {
    static const char *dirs[] = {"/tmp/usr", "/tmp/etc", "/tmp/dev", "/tmp/proc", "/tmp/tmp", "/tmp/old", 0};
    static const char *links[][2] = {{"usr/bin", "/tmp/bin"}, {"usr/sbin", "/tmp/sbin"}, {"usr/lib", "/tmp/lib"},
                                     {"usr/lib64", "/tmp/lib64"}, {0, 0}};
    static const char *covers[] = {"cmdline", "keys", "key-users", "kallsyms", "timer_list", 0};
    char path[64];
    must(mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0, 82);
    for (int i = 0; dirs[i]; i++) must(mkdir(dirs[i], 0755) != 0, 83);
    for (int i = 0; links[i][0]; i++) must(symlink(links[i][0], links[i][1]) != 0, 84);
    ro_bind("/usr", "/tmp/usr");
    ro_bind("/etc", "/tmp/etc");
    must(mount("/dev/toolrun-jail-dev", "/tmp/dev", 0, MS_BIND | MS_REC, 0) != 0, 85);
    must(mount("proc", "/tmp/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, 0) != 0, 86);
    for (int i = 0; covers[i]; i++) {
        snprintf(path, sizeof path, "/tmp/proc/%s", covers[i]);
        ro_bind("/dev/null", path);
    }
    must(mount(0, "/tmp/proc", 0, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, 0) != 0, 87);
    must(mount("tmpfs", "/tmp/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777") != 0, 88);
    must(syscall(SYS_pivot_root, "/tmp", "/tmp/old") != 0, 89);
    must(umount2("/old", MNT_DETACH) != 0, 70);
    must(rmdir("/old") != 0, 71);
    must(mount(0, "/", 0, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, 0) != 0, 72);
    must(chdir("/tmp") != 0, 73);
    struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
    struct sock_fprog program = {1, allow};
    must(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0, 74);
    must(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) != 0, 75);
}

static double ms(struct rusage *r) {
    return (r->ru_utime.tv_sec + r->ru_stime.tv_sec) * 1e3 + (r->ru_utime.tv_usec + r->ru_stime.tv_usec) / 1e3;
}

int main(int argc, char **argv) {
    unsigned long flags = strtoul(argv[1], 0, 0);
    int userns = atoi(argv[2]), runs = atoi(argv[3]), warm = 3, full = userns == 2;
    if (full) userns = 0;
    const char *command = argc > 4 ? argv[4] : "echo hi";
    int out[2];
    if (pipe(out)) return 1;
    uid_t uid = geteuid();
    gid_t gid = getegid();
    unsigned outside = uid == 0 ? 65534 : uid, outside_gid = uid == 0 ? 65534 : gid;
    struct rusage me0, kids0, me1, kids1;
    for (int i = 0; i < runs + warm; i++) {
        if (i == warm) { getrusage(RUSAGE_SELF, &me0); getrusage(RUSAGE_CHILDREN, &kids0); }
        int go[2];
        if (userns && pipe(go)) return 1;
        pid_t pid = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
        if (pid < 0) { perror("clone"); return 1; }
        if (pid == 0) {
            char c;
            if (userns) {  /* the parent maps our ids; then become the namespace's root: `nobody` outside */
                close(go[1]);
                if (read(go[0], &c, 1) != 1) _exit(91);
                if (setresgid(0, 0, 0) || setresuid(0, 0, 0)) _exit(96);
            }
            if (full) {
                must(mount(0, "/", 0, MS_REC | MS_PRIVATE, 0) != 0, 92);
                toolrun_mounts();
            } else if (flags & CLONE_NEWNS) {
                if (mount(0, "/", 0, MS_REC | MS_PRIVATE, 0)) _exit(92);
                if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, 0)) _exit(93);
                if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777")) _exit(94);
            }
            if (!userns && uid == 0 && flags) {
                if (setgroups(0, 0) || setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534)) _exit(95);
            }
            dup2(out[1], 1);
            char *args[] = {"sh", "-c", (char *)command, 0}, *env[] = {0};
            execve("/bin/sh", args, env);
            _exit(127);
        }
        if (userns) {
            char map[64];
            close(go[0]);
            put(pid, "setgroups", "deny");
            snprintf(map, sizeof map, "0 %u 1", outside); put(pid, "uid_map", map);
            snprintf(map, sizeof map, "0 %u 1", outside_gid); put(pid, "gid_map", map);
            if (write(go[1], "g", 1) != 1) return 1;
            close(go[1]);
        }
        int status;
        waitpid(pid, &status, 0);
        char said[4096];
        ssize_t n = status ? 0 : read(out[0], said, sizeof said - 1);
        if (status || (argc <= 4 && (n != 3 || memcmp(said, "hi\n", 3)))) {
            fprintf(stderr, "jail failed: status %d\n", status);
            return 1;
        }
        if (argc > 4) { said[n] = 0; fputs(said, stderr); }
    }
    getrusage(RUSAGE_SELF, &me1); getrusage(RUSAGE_CHILDREN, &kids1);
    printf("%f %f\n", (ms(&me1) - ms(&me0)) / runs, (ms(&kids1) - ms(&kids0)) / runs);
    return 0;
}
