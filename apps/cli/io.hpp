// apps/cli/io.hpp - how the ebac command reads inputs and writes outputs.
//
// Inputs: `-` is standard input; any other path is opened and read to its
// end without trusting a size (pipes, FIFOs, /dev/stdin, /proc files, process
// substitution). Opening a FIFO waits for a writer, as cat does; SIGINT and
// SIGTERM end the wait. A reader that knows how many bytes it needs stops one
// byte past them, so an endless input (/dev/zero) is refused as too long
// instead of filling memory.
//
// Outputs (output_file):
//  - a regular file, existing or new, is replaced atomically: the result goes
//    to a temporary file created beside it (O_CREAT|O_EXCL|O_NOFOLLOW, a
//    random name starting with ".ebac-tmp-"), is fsync'ed, given the old
//    file's permission bits (and owner and group where allowed; a new file
//    gets 0666 minus the umask) and renamed over the target. Readers see the
//    old file or the new one, never a part. Other hard links to the old file
//    keep the old content (the name is replaced, not the inode), as with mv;
//  - a symbolic link is followed: its target is what gets replaced (or
//    written, when it is not a regular file); a link to nothing is refused;
//  - anything else (a character device such as /dev/null, a FIFO, a socket,
//    `-`, or the file that standard output already is, e.g. /dev/stdout) is
//    written directly and in order, once the result is complete;
//  - standard output that is the input file itself (`1<>in.f32`, same
//    device and inode) is refused before anything is written, as zstd does;
//  - the output is opened (and its temporary file created) before any
//    work, so a missing directory is reported at once. Every signal that
//    ends the process and can be caught (INT, TERM, HUP, QUIT, USR1, USR2,
//    ALRM, PIPE, VTALRM, PROF, XCPU, POLL, PWR, SYS, the real-time ones, and
//    the crash signals where nothing else handles them) removes the
//    temporary file before the process ends by it; SIGXFSZ is ignored, so a
//    file-size limit (ulimit -f) is a write error (EFBIG) with a message and
//    the temporary file removed. After a SIGKILL or a power cut one may
//    remain, recognisable by its prefix.
#pragma once

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ebac/config.hpp>
#if EBAC_HAS_OPENMP()
#include <omp.h>
#endif

namespace ebac_cli {

/// Exit status 2: the command line is wrong.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// Exit status 1: an input, output or resource problem.
struct input_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline std::string input_name(const std::string& path) { return path == "-" ? std::string("standard input") : "'" + path + "'"; }
inline std::string errno_text(int e) { return std::strerror(e); }

// --- signals -----------------------------------------------------------------

/// The one temporary file the process may own, for the signal handler.
/// Written only with the handled signals blocked.
struct pending_temporary {
  volatile std::sig_atomic_t active = 0;
  int dirfd = -1;
  char name[NAME_MAX + 1] = {};
};
inline pending_temporary g_temporary;

/// The signals whose default action ends the process and that a handler
/// can catch (signal(7)), bar the crash signals below.
constexpr int handled_signals[] = {
    SIGINT,    SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGPIPE, SIGVTALRM, SIGPROF, SIGXCPU, SIGPOLL, SIGSYS,
#ifdef SIGPWR
    SIGPWR,
#endif
#ifdef SIGSTKFLT
    SIGSTKFLT,
#endif
};
/// Crash signals: handled only while nothing else handles them (a
/// sanitizer's handler is left alone); never blocked.
constexpr int crash_signals[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};

extern "C" inline void remove_temporary_and_die(int sig) {
  // Async-signal-safe only: unlinkat, raise. SA_RESETHAND has restored the
  // default action, so the re-raised signal ends the process once this returns.
  if (g_temporary.active) ::unlinkat(g_temporary.dirfd, g_temporary.name, 0);
  ::raise(sig);
}

/// Every signal remove_temporary_and_die may handle, real-time ones included.
template <class F>
void for_each_fatal_signal(F&& f) {
  for (int sig : handled_signals) f(sig, false);
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) f(sig, false);
  for (int sig : crash_signals) f(sig, true);
}

/// Installs the handlers (at start-up). A signal the parent set to be
/// ignored (nohup, background jobs) stays ignored. SIGXFSZ is ignored: past
/// a file-size limit a write then fails with EFBIG, which is reported, and the
/// temporary file is removed like after any failed write.
inline void install_signal_handlers() {
  for_each_fatal_signal([](int sig, bool crash) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0) return;
    if (old.sa_handler == SIG_IGN || (crash && ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL))) return;
    struct sigaction sa {};
    sa.sa_handler = remove_temporary_and_die;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    ::sigaction(sig, &sa, nullptr);
  });
  ::signal(SIGXFSZ, SIG_IGN);
}

/// Blocks the handled signals for its lifetime (while g_temporary changes).
class signal_block {
 public:
  signal_block() {
    sigset_t s;
    sigemptyset(&s);
    for_each_fatal_signal([&](int sig, bool crash) {
      if (!crash) sigaddset(&s, sig);  // blocking a fault signal is undefined
    });
    ::pthread_sigmask(SIG_BLOCK, &s, &old_);
  }
  ~signal_block() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  signal_block(const signal_block&) = delete;
  signal_block& operator=(const signal_block&) = delete;

 private:
  sigset_t old_;
};

// --- input -------------------------------------------------------------------

class input_file {
 public:
  explicit input_file(const std::string& path) : path_(path) {
    if (path == "-") {
      fd_ = 0;
    } else {
      if (path.empty()) throw usage_error("the input path is empty");
      do fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);  // a FIFO waits here for a writer
      while (fd_ < 0 && errno == EINTR);
      if (fd_ < 0) {
        if (errno == ENOENT) throw input_error("input file '" + path + "' does not exist");
        throw input_error("cannot open input '" + path + "': " + errno_text(errno));
      }
      owned_ = true;
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw input_error("cannot read input " + input_name(path) + ": " + errno_text(errno));
    if (S_ISDIR(st.st_mode)) throw input_error("input " + input_name(path) + " is a directory");
    if (S_ISREG(st.st_mode) && st.st_size > 0) size_hint_ = static_cast<std::uint64_t>(st.st_size);
    // A regular file that reports a size (/proc and sysfs files report 0:
    // they are read to their end like a pipe, their size not trusted).
    if (S_ISREG(st.st_mode) && st.st_size > 0) {
      const ::off_t at = ::lseek(fd_, 0, SEEK_CUR);  // standard input may start inside its file
      if (at >= 0) start_ = static_cast<std::uint64_t>(at);
      regular_ = at >= 0;
    }
  }
  ~input_file() {
    if (owned_) ::close(fd_);
  }
  input_file(const input_file&) = delete;
  input_file& operator=(const input_file&) = delete;

  /// Reads up to n (> 0) bytes into dst: how many, 0 at the end of the input.
  std::size_t read_some(std::byte* dst, std::size_t n) {
    for (;;) {
      const ::ssize_t r = ::read(fd_, dst, std::min<std::size_t>(n, std::size_t{1} << 30));
      if (r >= 0) return static_cast<std::size_t>(r);
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        struct pollfd p {
          fd_, POLLIN, 0
        };
        ::poll(&p, 1, -1);
        continue;
      }
      throw input_error("cannot read input " + input_name(path_) + ": " + errno_text(errno));
    }
  }

  /// Appends to buf until it holds `limit` bytes or the input ends; false
  /// at the end of the input. Memory grows with the bytes that arrive, not
  /// with `limit` (a header may claim any size).
  bool read_to(std::vector<std::byte>& buf, std::uint64_t limit) {
    constexpr std::uint64_t step = std::uint64_t{1} << 20;
    std::size_t have = buf.size();
    while (have < limit) {
      if (have == buf.size()) {
        const std::uint64_t grow = size_hint_ > have ? size_hint_ + 1 : std::max<std::uint64_t>(2 * have, step);
        buf.resize(static_cast<std::size_t>(std::min(limit, std::max<std::uint64_t>(grow, have + 1))));
      }
      const std::size_t r = read_some(buf.data() + have, buf.size() - have);
      if (r == 0) {
        buf.resize(have);
        return false;
      }
      have += r;
    }
    buf.resize(have);
    return true;
  }

  /// Exactly `need` bytes, or an error naming both sizes; `why` completes
  /// "... but <why> <need>" (e.g. "--dims and --dtype f32 need").
  std::vector<std::byte> read_exactly(std::uint64_t need, const std::string& why) {
    std::vector<std::byte> data;
    read_to(data, need + 1);
    if (data.size() > need) {
      if (size_hint_ > need)
        throw input_error("input " + input_name(path_) + " has " + std::to_string(size_hint_) + " bytes but " + why + " " +
                          std::to_string(need));
      throw input_error("input " + input_name(path_) + " has more than " + std::to_string(need) + " bytes but " + why + " " +
                        std::to_string(need));
    }
    if (data.size() < need)
      throw input_error("input " + input_name(path_) + " has " + std::to_string(data.size()) + " bytes but " + why + " " +
                        std::to_string(need));
    return data;
  }

  /// Whether the input is a regular file that reports a size, whose bytes
  /// read_at can read in any order.
  bool seekable() const { return regular_; }

  /// The input's size from where reading started (seekable(); its size
  /// now), or -1 for anything else.
  std::int64_t size_from_start() const {
    struct stat st {};
    if (!regular_ || ::fstat(fd_, &st) != 0 || static_cast<std::uint64_t>(st.st_size) < start_) return -1;
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(st.st_size) - start_);
  }

  /// Exactly n bytes at `offset` from where reading started (seekable()),
  /// without moving the read position; an error where the file ends first.
  void read_at(std::uint64_t offset, std::byte* dst, std::size_t n) const {
    while (n > 0) {
      const ::ssize_t r =
          ::pread(fd_, dst, std::min<std::size_t>(n, std::size_t{1} << 30), static_cast<::off_t>(start_ + offset));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw input_error("cannot read input " + input_name(path_) + ": " + errno_text(errno));
      if (r == 0) throw input_error("input " + input_name(path_) + " became shorter while it was read");
      dst += r;
      n -= static_cast<std::size_t>(r);
      offset += static_cast<std::uint64_t>(r);
    }
  }

  /// How messages name the input.
  std::string name() const { return input_name(path_); }

  /// Identity of a regular input file, to refuse writing over it.
  bool same_file(const struct stat& other) const {
    struct stat st {};
    return ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == other.st_dev && st.st_ino == other.st_ino;
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool owned_ = false;
  std::uint64_t size_hint_ = 0;
  std::uint64_t start_ = 0;  // a regular file's read position at open
  bool regular_ = false;
};

// --- output ------------------------------------------------------------------

class output_file {
 public:
  /// Checks and opens the output before any work (see the file comment).
  explicit output_file(const std::string& path) : path_(path) {
    if (path.empty()) throw usage_error("--output is empty");
    if (path == "-") {
      if (::isatty(1))
        throw usage_error("refusing to write binary data to a terminal: give --output FILE or redirect standard output");
      open_stdout();
      return;
    }
    struct stat st {};
    bool exists = ::lstat(path.c_str(), &st) == 0;
    if (!exists && errno != ENOENT) throw input_error("cannot access output '" + path + "': " + errno_text(errno));
    std::string target = path;
    if (exists && S_ISLNK(st.st_mode)) {
      if (::stat(path.c_str(), &st) != 0) {
        if (errno == ENOENT)
          throw input_error(
              "output '" + path +
              "' is a symbolic link to a file that does not exist (ebac writes through links, it does not create their targets)");
        throw input_error("cannot follow the output link '" + path + "': " + errno_text(errno));
      }
      if (S_ISREG(st.st_mode)) {
        char* real = ::realpath(path.c_str(), nullptr);
        if (!real) throw input_error("cannot resolve the output link '" + path + "': " + errno_text(errno));
        target = real;
        std::free(real);
      }
    }
    if (exists && S_ISDIR(st.st_mode)) throw input_error("output '" + path + "' is a directory");
    struct stat out_st {};
    if (exists && ::fstat(1, &out_st) == 0 && st.st_dev == out_st.st_dev && st.st_ino == out_st.st_ino) {
      open_stdout();  // e.g. /dev/stdout: what the caller redirected standard output to
      return;
    }
    if (exists && !S_ISREG(st.st_mode)) {
      open_direct();
      return;
    }
    existing_ = exists;
    old_ = st;
    open_temporary(target);
  }

  ~output_file() {
    if (fd_ >= 0 && fd_ != 1) ::close(fd_);
    if (!temp_name_.empty() && !committed_) {
      signal_block b;
      ::unlinkat(dirfd_, temp_name_.c_str(), 0);
      g_temporary.active = 0;
    }
    if (dirfd_ >= 0) ::close(dirfd_);
  }
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;

  /// Refuses an output that is this input file: a regular --output of that
  /// name, or standard output opened onto it (`1<>in`: writing would
  /// destroy the input as it is read).
  void check_not(const input_file& in) const {
    if (existing_ && in.same_file(old_)) throw usage_error("--output must not be the --input file");
    struct stat st {};
    if (fd_ == 1 && ::fstat(1, &st) == 0 && in.same_file(st))
      throw usage_error(
          "standard output is the input file " + in.name() +
          " (same device and inode): refusing to write over the input; redirect standard output elsewhere or give --output FILE");
  }

  void write(const void* data, std::size_t size) {
    const auto* p = static_cast<const char*>(data);
    while (size > 0) {
      const ::ssize_t w = ::write(fd_, p, std::min<std::size_t>(size, std::size_t{1} << 30));
      if (w < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) {
          struct pollfd q {
            fd_, POLLOUT, 0
          };
          ::poll(&q, 1, -1);
          continue;
        }
        write_failed(errno);
      }
      p += w;
      size -= static_cast<std::size_t>(w);
    }
  }

  /// Whether the output is a temporary file (a regular file, replaced at
  /// commit): write_at may place bytes anywhere in it, in any order.
  bool positional() const { return !temp_name_.empty(); }

  /// Writes size bytes at byte `offset` of the temporary file (positional()).
  void write_at(std::uint64_t offset, const void* data, std::size_t size) {
    const auto* p = static_cast<const char*>(data);
    while (size > 0) {
      const ::ssize_t w = ::pwrite(fd_, p, std::min<std::size_t>(size, std::size_t{1} << 30), static_cast<::off_t>(offset));
      if (w < 0) {
        if (errno == EINTR) continue;
        write_failed(errno);
      }
      if (w == 0) write_failed(EIO);  // a regular file that takes nothing: never loop on it
      p += w;
      offset += static_cast<std::uint64_t>(w);
      size -= static_cast<std::size_t>(w);
    }
  }

  /// Makes the result visible: for a regular file, mode, fsync and rename.
  void commit() {
    if (temp_name_.empty()) {
      committed_ = true;
      return;
    }
    if (existing_) {
      // Owner and group first (that may clear set-id bits), then the mode.
      if (old_.st_uid != ::geteuid() || old_.st_gid != ::getegid()) (void)::fchown(fd_, old_.st_uid, old_.st_gid);
      if (::fchmod(fd_, old_.st_mode & 07777) != 0)
        throw input_error("cannot give the new " + shown() + " the old file's mode: " + errno_text(errno));
    } else {
      const ::mode_t mask = ::umask(0);
      ::umask(mask);
      if (::fchmod(fd_, 0666 & ~mask) != 0) throw input_error("cannot set the mode of " + shown() + ": " + errno_text(errno));
    }
    if (::fsync(fd_) != 0) throw input_error("cannot write output " + shown() + ": " + errno_text(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw input_error("cannot write output " + shown() + ": " + errno_text(errno));
    {
      signal_block b;
      if (::renameat(dirfd_, temp_name_.c_str(), dirfd_, base_.c_str()) != 0)
        throw input_error("cannot move the result into " + shown() + ": " + errno_text(errno));
      committed_ = true;
      g_temporary.active = 0;
    }
    (void)::fsync(dirfd_);  // the rename itself; not every file system supports it
  }

 private:
  [[noreturn]] void write_failed(int e) const {
    if (e == EFBIG)
      throw input_error("cannot write output " + shown() + ": " + errno_text(e) +
                        " (past the file size limit, ulimit -f, or the file system's largest file)");
    throw input_error("cannot write output " + shown() + ": " + errno_text(e));
  }

  std::string shown() const { return path_ == "-" ? std::string("standard output") : "'" + path_ + "'"; }

  void open_stdout() {
    struct stat st {};
    if (::fstat(1, &st) != 0) throw input_error("standard output is not open");
    fd_ = 1;
  }

  void open_direct() {
    do fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);  // a FIFO waits here for a reader
    while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0) throw input_error("cannot open output '" + path_ + "': " + errno_text(errno));
  }

  void open_temporary(const std::string& target) {
    const auto slash = target.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : target.substr(0, slash);
    base_ = slash == std::string::npos ? target : target.substr(slash + 1);
    if (base_.empty() || base_ == "." || base_ == "..") throw input_error("output '" + path_ + "' does not name a file");
    dirfd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd_ < 0) {
      if (errno == ENOENT) throw input_error("output directory '" + dir + "' does not exist");
      if (errno == ENOTDIR) throw input_error("output directory '" + dir + "' is not a directory");
      throw input_error("cannot open the output directory '" + dir + "': " + errno_text(errno));
    }
    // ".ebac-tmp-<name>.<16 random hex digits>", within NAME_MAX.
    const std::string stem = ".ebac-tmp-" + base_.substr(0, 200) + ".";
    for (int attempt = 0; attempt < 100; ++attempt) {
      std::uint64_t r = 0;
      if (::getrandom(&r, sizeof r, 0) != static_cast<::ssize_t>(sizeof r)) {
        struct timespec ts {};
        ::clock_gettime(CLOCK_MONOTONIC, &ts);
        r = (static_cast<std::uint64_t>(ts.tv_nsec) << 20) ^ static_cast<std::uint64_t>(ts.tv_sec) ^
            (static_cast<std::uint64_t>(::getpid()) << 40) ^ static_cast<std::uint64_t>(attempt) * 0x9e3779b97f4a7c15u;
      }
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(r));
      const std::string name = stem + hex;
      signal_block b;
      const int fd = ::openat(dirfd_, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd < 0) {
        if (errno == EEXIST || errno == EINTR) continue;
        throw input_error("cannot create a file in the output directory '" + dir + "': " + errno_text(errno));
      }
      fd_ = fd;
      temp_name_ = name;
      g_temporary.dirfd = dirfd_;
      std::memcpy(g_temporary.name, name.c_str(), name.size() + 1);
      g_temporary.active = 1;
      return;
    }
    throw input_error("cannot create a temporary file in the output directory '" + dir + "'");
  }

  std::string path_, base_, temp_name_;
  int fd_ = -1, dirfd_ = -1;
  bool existing_ = false, committed_ = false;
  struct stat old_ {};
};

// --- threads -----------------------------------------------------------------

/// The most --threads accepts: far beyond any useful count, far below where
/// creating them is a burden on the machine.
inline constexpr int max_threads = 1024;

/// Starts the worker threads before any data is allocated. libgomp ends the
/// process with its own message when it cannot create a thread ("Thread
/// creation failed"), so the same number of threads is first created here,
/// where a failure is an error that can be reported; then OpenMP's team is
/// formed once, and the codec's later parallel regions reuse it.
inline void start_threads(int requested) {
#if EBAC_HAS_OPENMP()
  const int t = requested > 0 ? requested : omp_get_max_threads();
  if (t <= 1) return;
  std::vector<std::thread> probe;
  std::mutex m;
  std::condition_variable cv;
  bool release = false;
  auto finish = [&] {
    {
      std::lock_guard<std::mutex> lock(m);
      release = true;
    }
    cv.notify_all();
    for (auto& th : probe) th.join();
  };
  try {
    probe.reserve(static_cast<std::size_t>(t));
    for (int i = 1; i < t; ++i)
      probe.emplace_back([&] {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return release; });
      });
  } catch (const std::system_error& e) {
    finish();
    throw input_error("cannot start " + std::to_string(t) + " threads (" + e.code().message() + "): use a smaller --threads");
  } catch (const std::bad_alloc&) {
    finish();
    throw input_error("cannot start " + std::to_string(t) + " threads (out of memory): use a smaller --threads");
  }
  finish();
  // Start the team now, while memory is plentiful, and let libgomp make its
  // lazily allocated work-share blocks here too (more loops in flight than
  // a team holds inline): under a memory limit its own malloc failing later,
  // inside the library's first loops, would end the process with libgomp's
  // message instead of one ebac error line.
#pragma omp parallel num_threads(t)
  {
    for (int k = 0; k < 64; ++k) {
#pragma omp for schedule(dynamic, 1) nowait
      for (int i = 0; i < 4 * t; ++i) {}
    }
  }
#else
  (void)requested;
#endif
}

}  // namespace ebac_cli
