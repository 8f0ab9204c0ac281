// The target that compiles tests/precompiled.hpp once for every test executable (DLOCK_PCH).
