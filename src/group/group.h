/* group.h - moved to core/group.h (the group object, poisoning, waits and
 * hooks sit below the transports now). Kept for branches in flight; modules
 * below src/group must include core/group.h (scripts/check_layers.py). */
#include "core/group.h"
