// A header with two undocumented declarations: the doxygen check must fail on it
// (tests/packaging: docs.the_check_fails_on_an_undocumented_declaration).
#pragma once

/// @namespace dlock_sample
/// A documented namespace.
namespace dlock_sample {

/// A documented class.
class widget {
public:
    /// A documented member.
    void documented();
    void undocumented_member();
};

int undocumented_function(int x);

} // namespace dlock_sample
