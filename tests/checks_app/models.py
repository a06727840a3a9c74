# ruff: noqa: DJ008 -- models for checks only, never shown, so no __str__
"""Models for the model checks (tests/test_checks_models.py), installed by those tests only.

A project under the one-line switch whose startapp app still pins BigAutoField, with generic
relations of every kind (Django's, taggit's default TaggedItem and a big-integer through) and
django-simple-history's historical models.
"""

from __future__ import annotations

from django.contrib.contenttypes.fields import GenericForeignKey, GenericRelation
from django.contrib.contenttypes.models import ContentType
from django.db import models
from simple_history.models import HistoricalRecords
from taggit.managers import TaggableManager
from taggit.models import CommonGenericTaggedItemBase, TaggedItemBase

from django_snowflake.fields import SnowflakeAutoField
from django_snowflake.models import SnowflakeModel


class Pinned(models.Model):
    """Keyed by the app's default_auto_field: W040 names the app."""


class PinnedChild(Pinned):
    """Its key is the parent link: nothing of its own to report."""


class Explicit(models.Model):
    """An integer key declared on the model: W040 names the model."""

    id = models.AutoField(primary_key=True)


class Coded(models.Model):
    """A text key is a choice, not a missed switch."""

    code = models.CharField(primary_key=True, max_length=10)


class Comment(models.Model):
    """Django's generic relation, with the common 32-bit object_id: W042."""

    content_type = models.ForeignKey(ContentType, models.CASCADE)
    object_id = models.PositiveIntegerField()
    content_object = GenericForeignKey()


class WideComment(models.Model):
    """The same with a 64-bit object_id: fine."""

    content_type = models.ForeignKey(ContentType, models.CASCADE)
    object_id = models.PositiveBigIntegerField()
    content_object = GenericForeignKey()


class Attachment(models.Model):
    """No GenericForeignKey, only reached by Post's GenericRelation: W042 all the same."""

    content_type = models.ForeignKey(ContentType, models.CASCADE)
    object_id = models.IntegerField()


class TaggedPost(CommonGenericTaggedItemBase, TaggedItemBase):
    """taggit's documented through model for other key types, with a 64-bit object_id."""

    object_id = models.BigIntegerField(db_index=True)


class Post(SnowflakeModel):
    comments = GenericRelation(Comment)
    attachments = GenericRelation(Attachment)
    tags = TaggableManager(through=TaggedPost)


class Photo(SnowflakeModel):
    """Tagged through taggit's default TaggedItem, whose object_id is an IntegerField: W042."""

    tags = TaggableManager()


class Audited(SnowflakeModel):
    """django-simple-history's default: HistoricalAudited keeps an AutoField history_id (W043)."""

    history = HistoricalRecords()


class AuditedByUserId(SnowflakeModel):
    """The user's key in a 32-bit column without a foreign key: W042 for a Snowflake user."""

    history = HistoricalRecords(history_user_id_field=models.IntegerField(null=True, blank=True))


class AuditedWide(SnowflakeModel):
    """Both of simple-history's keys as W042 and W043 ask: nothing to report."""

    history = HistoricalRecords(
        history_id_field=SnowflakeAutoField(),
        history_user_id_field=models.BigIntegerField(null=True, blank=True),
    )


class Member(SnowflakeModel):
    """A Snowflake-keyed model to stand as AUTH_USER_MODEL for W042."""
