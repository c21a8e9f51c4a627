from django.urls import path

from .views import bias, captions, leaderboard, pages, releases, review, work

app_name = "frontend"
urlpatterns = [
    path("", pages.home, name="home"),
    path("batches/<int:batch_id>/", pages.batch_page, name="batch"),
    path("batches/<int:batch_id>/bias/", bias.bias_page, name="batch-bias"),
    path("work/", work.work_home, name="work"),
    path("work/next/", work.work_next, name="work-next"),
    path("work/assignments/<int:assignment_id>/", work.hit_page, name="hit"),
    path(
        "work/assignments/<int:assignment_id>/items/<int:item_id>/image/",
        work.item_image,
        name="item-image",
    ),
    path("review/", review.review_list, name="review"),
    path("review/<int:assignment_id>/", review.review_detail, name="review-detail"),
    path("workers/", review.worker_list, name="workers"),
    path("workers/<int:worker_id>/block/", review.worker_block_toggle, name="worker-block"),
    path("captions/invalid/", captions.invalid_captions, name="invalid-captions"),
    path("releases/<int:release_id>/download/", releases.release_download, name="release-download"),
    path("releases/<int:release_id>/leaderboard/", leaderboard.leaderboard, name="leaderboard"),
]
