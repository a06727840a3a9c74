"""shop/models.py of the fresh project (copied there by tests/test_fresh_project.py)."""

from __future__ import annotations

from django.contrib.contenttypes.fields import GenericForeignKey, GenericRelation
from django.contrib.contenttypes.models import ContentType
from django.db import models
from taggit.managers import TaggableManager
from taggit.models import CommonGenericTaggedItemBase, TaggedItemBase


class SnowflakeTaggedItem(CommonGenericTaggedItemBase, TaggedItemBase):
    """taggit's TaggedItem with a 64-bit object_id (taggit's own is an IntegerField)."""

    object_id = models.BigIntegerField(db_index=True)


class Product(models.Model):
    name = models.CharField(max_length=100)
    tags = TaggableManager(through=SnowflakeTaggedItem, blank=True)
    notes = GenericRelation("Note")

    def __str__(self) -> str:
        return self.name


class Shelf(models.Model):
    """Tagged through taggit's own TaggedItem, as taggit's tutorial writes it."""

    name = models.CharField(max_length=100)
    tags = TaggableManager()

    def __str__(self) -> str:
        return self.name


class Basket(models.Model):
    """A model with no column but its key (Django inserts an explicit NULL key for it)."""

    products = models.ManyToManyField(Product, blank=True)

    def __str__(self) -> str:
        return f"Basket {self.pk}"


class Note(models.Model):
    """A generic relation whose object_id holds a Snowflake key."""

    content_type = models.ForeignKey(ContentType, models.CASCADE)
    object_id = models.PositiveBigIntegerField()
    content_object = GenericForeignKey()
    text = models.CharField(max_length=100)

    def __str__(self) -> str:
        return self.text


class Comment(models.Model):
    """The generic relation of Django's documentation: its object_id holds 32 bits."""

    content_type = models.ForeignKey(ContentType, models.CASCADE)
    object_id = models.PositiveIntegerField()
    content_object = GenericForeignKey()

    def __str__(self) -> str:
        return f"Comment {self.pk}"
