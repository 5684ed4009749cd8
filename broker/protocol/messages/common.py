"""Field groups that many APIs share exactly (same names, types, versions and defaults).

Fields are frozen values, so one object can sit in several schemas. Only groups that are truly
the same everywhere they are used live here; a field whose versions or default differ in an API
stays spelled out in that API's module. This module defines no `API`, so the registry skips it.
"""

from __future__ import annotations

from ..schema import F, Field

THROTTLE_TIME_MS = F("throttle_time_ms", "int32")

# error_code followed by a nullable error_message, both in every version.
ERROR = (F("error_code", "int16"), F("error_message", "string", nullable="0+"))

# A partition's result where only an error code is reported.
PARTITION_ERROR = (F("partition_index", "int32"), F("error_code", "int16"))

# The transactional producer a transaction request speaks for (AddOffsetsToTxn, EndTxn).
TXN_PRODUCER = (
    F("transactional_id", "string"),
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
)

# A classic group member's identity in the group requests after JoinGroup.
GROUP_MEMBER = (
    F("group_id", "string"),
    F("generation_id", "int32"),
    F("member_id", "string"),
    F("group_instance_id", "string", "3+", nullable="3+", default=None),
)

# A config resource (topic 2, broker 4, ...) as AlterConfigs-style APIs name it.
RESOURCE = (F("resource_type", "int8"), F("resource_name", "string"))

# The ACL binding filter of DescribeAcls (the whole request) and DeleteAcls (each filter);
# v0 only knows literal names, so the pattern type defaults to 3 = MATCH.
ACL_FILTER = (
    F("resource_type_filter", "int8"),
    F("resource_name_filter", "string", nullable="0+"),
    F("pattern_type_filter", "int8", "1+", default=3),
    F("principal_filter", "string", nullable="0+"),
    F("host_filter", "string", nullable="0+"),
    F("operation", "int8"),
    F("permission_type", "int8"),
)

# Who may do what from where: the access part of an ACL binding.
ACL_ACCESS = (
    F("principal", "string"),
    F("host", "string"),
    F("operation", "int8"),
    F("permission_type", "int8"),
)


def topic_partitions(array: str, *fields: Field, partitions: str = "partitions") -> Field:
    """The usual per-topic nesting, `array: [{name, <partitions>: [{fields...}]}]`, in every
    version, neither level nullable."""
    return F(array, [F("name", "string"), F(partitions, list(fields))])
