// ThreadSanitizer suppressions for a race inside Debian's Gloo, which tandem
// links and cannot change. Linked only under --config=tsan (third_party/BUILD).
// Project code gets no suppressions: a race in tandem is fixed, not hidden.
//
// The race (libgloo0 0.0~git20220518; upstream's tcp/unbound_buffer.cc is
// unchanged): when a peer's connection fails, Gloo's device-loop thread calls
// UnboundBuffer::signalException on the buffers pending on that pair, which
// broadcasts the buffer's condition variables. The thread running the
// collective (inside gloo::allgather and friends, which own the buffer) may
// already have seen the exception through another pair, unwound and
// destroyed the buffer; nothing in Gloo orders that destructor after the
// broadcast. It happens only when a rank has exited or timed out, which
// tandem's error tests do on purpose (e.g. //comm/gloo:gloo_split_test,
// ARankThatNeverSplitsFailsTheOthers: 1 run in about 20 under TSan).

// The TSan runtime calls this at start-up if the executable defines it.
extern "C" const char* __tsan_default_suppressions() {
  return "race:gloo::transport::tcp::UnboundBuffer::signalException\n";
}
