"""Scheduled delivery: delay levels (``SCHEDULE_TOPIC_XXXX``) and timer messages.

``service.ScheduleService`` parks DELAY messages and writes them to their real topic when due;
``wheel`` is its bounded in-memory due-time index, ``timer_codec`` the timer log's record
format, ``timer_log`` the file and ``settings`` their ``ScheduleSettings`` (``[schedule]``).
Protocol-neutral: no gRPC, no protobuf (recall handles are encoded by the adapters).
"""
